"""A Worker in the built-in policy: its rules (:mod:`._rules`: configs proposed from the search
space) and what it does with them (:mod:`._agent`: one experiment in its workspace, through the
tools)."""
