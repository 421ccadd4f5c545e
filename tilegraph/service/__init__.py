"""The tilegraph service: submit, watch and cancel jobs over HTTP, with a live dashboard.

``tilegraph serve`` starts it (:func:`tilegraph.service.server.serve`); the ASGI
application is :func:`tilegraph.service.app.create_app`; jobs run on a pool
(:mod:`tilegraph.service.pool`) each in its own process (:mod:`tilegraph.service.runner`),
recorded in SQLite (:mod:`tilegraph.service.jobs`); :class:`tilegraph.Client`
(:mod:`tilegraph.service.client`) talks to it from Python. The web stack (Starlette,
uvicorn) is the ``service`` extra and is imported only by the server, never by the client
or ``import tilegraph``.
"""
