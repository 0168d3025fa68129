"""`gitrelay demo`: a throw-away relay and two agents handing work to each other."""
