"""The inbox: what is waiting for a teammate, its derived SQLite index, and the quick look a
coding host's hook takes without opening the relay."""
