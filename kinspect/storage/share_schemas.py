"""KIP-932 share-group state records (the __share_group_state topic, share coordinator).

Transcribed from Apache Kafka's share-coordinator record definitions
(share-coordinator/src/main/resources/common/message/*.json, Apache License 2.0) as the
Kafka 4.1.2 jars define them (share groups are a preview there: the layout may change).
Same notation as kinspect/storage/_record_schemas.py.
"""

from __future__ import annotations

_KEY = (
    {'name': 'GroupId', 'type': 'string', 'versions': '0'},
    {'name': 'TopicId', 'type': 'uuid', 'versions': '0'},
    {'name': 'Partition', 'type': 'int32', 'versions': '0'},
)
_STATE_BATCH = (
    {'name': 'FirstOffset', 'type': 'int64', 'versions': '0'},
    {'name': 'LastOffset', 'type': 'int64', 'versions': '0'},
    {'name': 'DeliveryState', 'type': 'int8', 'versions': '0'},
    {'name': 'DeliveryCount', 'type': 'int16', 'versions': '0'},
)

SHARE_STRUCTS = {
    'ShareSnapshotKey': ((0, 0, None, _KEY, {}, '4.1'),),
    'ShareSnapshotValue': ((0, 0, 0, (
        {'name': 'SnapshotEpoch', 'type': 'int32', 'versions': '0'},
        {'name': 'StateEpoch', 'type': 'int32', 'versions': '0+'},
        {'name': 'LeaderEpoch', 'type': 'int32', 'versions': '0+'},
        {'name': 'StartOffset', 'type': 'int64', 'versions': '0'},
        {'name': 'CreateTimestamp', 'type': 'int64', 'versions': '0'},
        {'name': 'WriteTimestamp', 'type': 'int64', 'versions': '0'},
        {'name': 'StateBatches', 'type': '[]StateBatch', 'versions': '0', 'fields': _STATE_BATCH},
    ), {}, '4.1'),),
    'ShareUpdateKey': ((0, 0, None, _KEY, {}, '4.1'),),
    'ShareUpdateValue': ((0, 0, 0, (
        {'name': 'SnapshotEpoch', 'type': 'int32', 'versions': '0'},
        {'name': 'LeaderEpoch', 'type': 'int32', 'versions': '0+'},
        {'name': 'StartOffset', 'type': 'int64', 'versions': '0'},
        {'name': 'StateBatches', 'type': '[]StateBatch', 'versions': '0', 'fields': _STATE_BATCH},
    ), {}, '4.1'),),
}
SHARE_RECORD_TYPES = {
    0: ('ShareSnapshotKey', 0, 'ShareSnapshotValue'),
    1: ('ShareUpdateKey', 0, 'ShareUpdateValue'),
}
