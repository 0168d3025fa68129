"""The library both front ends call: threads, inbox, trust, provenance, setup and policy.

It raises typed errors (gitrelay.core.errors) and never prints.
"""
