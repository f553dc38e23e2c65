"""The lab dashboard: a web face over a lab's records (``rsilab ui``) and the one-file HTML
report (``rsilab report CAMPAIGN --html``).

Pages are rendered on the server from the store through Jinja2 templates (autoescaped,
:mod:`rsilab.web._templates`), with inline CSS and SVG charts, so nothing is fetched from the
network. The server only reads, except for guidance typed into a campaign's page, which is
recorded as ``rsilab guide`` records it.
"""
