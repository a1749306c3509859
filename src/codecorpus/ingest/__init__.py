"""Sources -> document rows: planning (listing files into shards) and reading them."""
