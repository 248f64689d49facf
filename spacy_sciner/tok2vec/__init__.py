"""Token representations for ``sciner_spancat`` beyond a plain transformer listener."""
