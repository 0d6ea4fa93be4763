"""The games this node serves: one owner per live game, its folded state, subscribers and appends."""
