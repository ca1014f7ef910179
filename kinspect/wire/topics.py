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


MAX_RECORDED = 100_000  # topic ids a RecordedTopicNames follows before it gives up (``overflow``)


class RecordedTopicNames(TopicNames):
    """TopicNames for a run of some of a capture's connections (pipeline.DecodeRun's ``flows``):
    it also keeps what it takes to tell whether the other runs' learning would have named its
    topics otherwise. ``position`` (set by the run) orders learning and lookups across runs.
    ``learned``: id -> [position first learned, names]; ``unnamed``: id -> position of its last
    lookup that found no name."""

    def __init__(self):
        super().__init__()
        self.position = 0
        self.learned: dict[str, list] = {}
        self.unnamed: dict[str, int] = {}
        self.overflow = False

    def learn(self, api_key: int, body: dict | None) -> None:
        super().learn(api_key, body)
        if not body or self.overflow:
            return
        for topics in _topic_lists(body):
            for topic in topics:
                topic_id, name = topic.get("topic_id"), topic.get("name")
                if topic_id and name and topic_id != NULL_TOPIC_ID:
                    seen = self.learned.setdefault(topic_id, [self.position, []])
                    if len(seen[1]) < 2 and name not in seen[1]:  # two names already fail the check
                        seen[1].append(name)
        self.overflow = len(self.learned) > MAX_RECORDED

    def annotate(self, body: dict | None) -> None:
        super().annotate(body)
        if not body or self.overflow:
            return
        for topics in _topic_lists(body):
            for topic in topics:
                if topic.get("topic", "") is None and topic.get("topic_id"):
                    self.unnamed[topic["topic_id"]] = self.position
        self.overflow = len(self.unnamed) > MAX_RECORDED
