"""Gateway workers: the Celery tasks, the turn runner and the agents. They declare the protocols
they call (ports.py, agents/base.py); the wiring in hbgw/ hands them the implementations. Never
imports beat/.
"""
