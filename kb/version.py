"""The package version, in a module of its own so that the modules inside kb can read it
without importing the package's public facade (kb/__init__.py).

In: nothing. Out: `__version__`.
"""

__version__ = "0.1.0"
