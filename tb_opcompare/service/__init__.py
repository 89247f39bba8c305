"""One module per use case (runs, compare, sweep): each turns the catalog's runs and the
analysis into the document that both the HTTP routes and the CLI serve, plus its CSV
and figures."""
