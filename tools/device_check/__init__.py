"""tools/device-check's program (the usage is in tools/device-check itself):
cli reads the options; prepare and run are the two halves, each a list of
steps; settings holds every setting; replay runs the build's recorded meson
tests; loader, proc, figures and cudart_query are their helpers."""
