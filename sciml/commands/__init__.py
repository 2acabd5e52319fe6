"""``sciml`` subcommands that are not Lightning runs (``sciml data prepare``); :mod:`sciml.cli` dispatches."""
