"""The fabric check: is the node-to-node link what NCCL needs (path MTU, interfaces, RDMA ports,
iperf3, all_reduce_perf), with a verdict against the line rate and the fix.  No Textual here."""
