"""The handoff operations every front end calls: the client, the policy, setting up
(init, join), history, and text for people (render).

It raises typed errors (gitrelay.core.errors), logs through :mod:`logging`, and never prints.
"""
