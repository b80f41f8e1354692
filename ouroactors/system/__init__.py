"""The actor system: lifecycle, handles, the tree host and thespian process fixes."""
