"""Answer sentences, their support in the cited text, and citations resolved to spans."""
