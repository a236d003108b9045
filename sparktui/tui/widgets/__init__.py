"""Widgets: they render state and never do IO."""
