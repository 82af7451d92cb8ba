"""The Ray shells: remote tasks and actor classes, thin wrappers over work/ and coordinator/."""
