"""The ground floor: settings, errors, clock, JSON lines, the embedded Redis server.

Imports nothing from the other packages of the project.
"""
