"""Beat: claims due heartbeats from the Redis index and publishes them to their owners; the
restore pass that rebuilds the index from SQL. Never imports workers/.
"""
