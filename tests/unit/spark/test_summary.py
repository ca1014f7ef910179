"""kinspect/spark/summary.py's text: what the capture named is shown escaped."""

from kinspect.spark.summary import render


def test_escape_sequences_from_the_capture_are_shown_escaped():
    rows = {"talkers": [{"client_id": "c\x1b]0;owned\x07\x1b[2J", "bytes": 10}],
            "topics": [{"topic": "t\x9b31m", "topic_id": None, "exchanges": 1, "bytes": 10}]}
    text = render(rows)
    assert "c\\x1b]0;owned\\x07\\x1b[2J" in text and "t\\x9b31m" in text
    assert not [c for c in text if (c < " " and c != "\n") or "\x7f" <= c < "\xa0"]
