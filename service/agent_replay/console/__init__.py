"""Terminal clients of the public `/v1` API (`agent-replay tail`).

They talk HTTP to any replica, with a key when one is given, and never touch
the database or the service's internals: what they show is what any client
of the API can see.
"""
