"""TensorBoard's side: the plugin loader (imports nothing heavy), the data routes (parse a
request, call a service, encode its answer) and the tab's static files."""
