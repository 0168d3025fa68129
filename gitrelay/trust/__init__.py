"""Trust: which teammates an agent works with (the trust file, its edits, its keys), and
teammate-written text fenced as data before a model reads it."""
