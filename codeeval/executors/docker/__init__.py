"""The Docker sandbox: the engine, images, locked-down containers, and the fork server that
runs inside each (server.py, stdlib only, copied into the images)."""
