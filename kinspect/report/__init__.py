"""kinspect report: one self-contained HTML page of charts and tables drawn from what doctor,
clients, decode --summary, validate and storage compute (gather.py collects, model.py lays the
charts out as plain data, page.py writes the HTML, escape.py keeps the input's text inert)."""
