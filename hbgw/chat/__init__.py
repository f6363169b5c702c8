"""`hbgw chat`: a terminal client that talks to the HTTP API only (httpx, never the store)."""
