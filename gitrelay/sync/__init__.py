"""Moving commits between the local copy and the relay: fetch, push, verify, the loop."""
