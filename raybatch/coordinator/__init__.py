"""The batch coordinator and its parts: offers, submit, batch create and poll, recovery, filing."""
