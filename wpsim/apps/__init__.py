"""Applications: the ``wpsim`` command line, the demo, the gradient audit, the scene library
and the command line shared by the examples."""
