"""Bridges from sciml potentials to MD engines driven from Python (LAMMPS through ``fix external``)."""
