"""Topic ids → names, learned from responses seen earlier in the capture.

Fetch v13+, Produce v13+ and the share-group APIs name topics by id only. Metadata, CreateTopics
and DescribeTopicPartitions responses carry both, so a capture that saw them can name the topics.
"""

from __future__ import annotations

NULL_TOPIC_ID = "00000000-0000-0000-0000-000000000000"


def _topic_lists(body: dict):
    for value in body.values():
        if type(value) is list and value and type(value[0]) is dict and "topic_id" in value[0]:
            yield value


class TopicNames:
    def __init__(self):
        self.names: dict[str, str] = {}

    def learn(self, api_key: int, body: dict | None) -> None:
        if not body:
            return
        for topics in _topic_lists(body):
            for topic in topics:
                topic_id, name = topic.get("topic_id"), topic.get("name")
                if topic_id and name and topic_id != NULL_TOPIC_ID:
                    self.names[topic_id] = name

    def annotate(self, body: dict | None) -> None:
        """Adds "topic" beside every top-level "topic_id" that has no name next to it."""
        if not body:
            return
        names = self.names
        for topics in _topic_lists(body):
            for topic in topics:
                if "name" not in topic and "topic" not in topic:
                    topic["topic"] = names.get(topic.get("topic_id"))
