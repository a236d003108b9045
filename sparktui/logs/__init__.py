"""Log streams: sanitising, the bounded in-memory store the faces read, persistence helpers."""
