"""One module per subcommand: ``run(args) -> int``.  Imported lazily by cli.main."""
