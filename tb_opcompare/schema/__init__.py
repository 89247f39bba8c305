"""The shapes data takes on its way to the user: the per-op table every reader produces
(``optable``) and the documents the API and the CLI serve."""
