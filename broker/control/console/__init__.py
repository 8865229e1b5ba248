"""The web console the control endpoint serves at ``/console`` (issue 34).

Server-rendered pages (jinja2 templates in ``templates/``) over plain dictionaries that
the ``view_*`` modules read from the running cluster between two requests of the
brokers; one small script (``static/console.js``, no build step) keeps each page live
through Server-Sent Events and posts the fault forms as JSON with the control token.
"""
