"""KRaft metadata records (the values in __cluster_metadata and in .checkpoint snapshots).

Transcribed from Apache Kafka's metadata record definitions
(metadata/src/main/resources/common/metadata/*.json, Apache License 2.0) and checked field by
field against the message schemas of the Kafka 4.1.2 jars. The notation is the one of
kinspect/wire/_schemas.py: Kafka's names and version ranges; tagged fields keep their place in
the definition (kafka-dump-log's JSON follows it) and their default (omitted when equal).

METADATA_RECORDS[api_key] = (name, last_version, fields); every record is flexible from 0.
"""

from __future__ import annotations

_ENDPOINT = (
    {'name': 'Name', 'type': 'string', 'versions': '0+'},
    {'name': 'Host', 'type': 'string', 'versions': '0+'},
    {'name': 'Port', 'type': 'uint16', 'versions': '0+'},
    {'name': 'SecurityProtocol', 'type': 'int16', 'versions': '0+'},
)
_FEATURE = (
    {'name': 'Name', 'type': 'string', 'versions': '0+'},
    {'name': 'MinSupportedVersion', 'type': 'int16', 'versions': '0+'},
    {'name': 'MaxSupportedVersion', 'type': 'int16', 'versions': '0+'},
)


def _tagged(name: str, kind: str, tag: int, versions: str = '0+', default=0, nullable=False):
    field = {'name': name, 'type': kind, 'versions': versions, 'tag': tag,
             'taggedVersions': versions}
    if nullable:
        field['nullableVersions'] = versions
    if default != 0:
        field['default'] = default
    return field


def _plain(*names_and_types: str) -> tuple[dict, ...]:
    return tuple({'name': name, 'type': kind, 'versions': '0+'}
                 for name, kind in (pair.split(':') for pair in names_and_types))


METADATA_RECORDS = {
    0: ('RegisterBrokerRecord', 3, (
        {'name': 'BrokerId', 'type': 'int32', 'versions': '0+'},
        {'name': 'IsMigratingZkBroker', 'type': 'bool', 'versions': '2+'},
        {'name': 'IncarnationId', 'type': 'uuid', 'versions': '0+'},
        {'name': 'BrokerEpoch', 'type': 'int64', 'versions': '0+'},
        {'name': 'EndPoints', 'type': '[]BrokerEndpoint', 'versions': '0+', 'fields': _ENDPOINT},
        {'name': 'Features', 'type': '[]BrokerFeature', 'versions': '0+', 'fields': _FEATURE},
        {'name': 'Rack', 'type': 'string', 'versions': '0+', 'nullableVersions': '0+'},
        {'name': 'Fenced', 'type': 'bool', 'versions': '0+', 'default': True},
        {'name': 'InControlledShutdown', 'type': 'bool', 'versions': '1+'},
        _tagged('LogDirs', '[]uuid', 0, '3+'),
    )),
    1: ('UnregisterBrokerRecord', 0, _plain('BrokerId:int32', 'BrokerEpoch:int64')),
    2: ('TopicRecord', 0, _plain('Name:string', 'TopicId:uuid')),
    3: ('PartitionRecord', 2, (
        *_plain('PartitionId:int32', 'TopicId:uuid', 'Replicas:[]int32', 'Isr:[]int32',
                'RemovingReplicas:[]int32', 'AddingReplicas:[]int32', 'Leader:int32'),
        _tagged('LeaderRecoveryState', 'int8', 0),
        *_plain('LeaderEpoch:int32', 'PartitionEpoch:int32'),
        {'name': 'Directories', 'type': '[]uuid', 'versions': '1+'},
        _tagged('EligibleLeaderReplicas', '[]int32', 1, '2+', None, True),
        _tagged('LastKnownElr', '[]int32', 2, '2+', None, True),
    )),
    4: ('ConfigRecord', 0, (
        *_plain('ResourceType:int8', 'ResourceName:string', 'Name:string'),
        {'name': 'Value', 'type': 'string', 'versions': '0+', 'nullableVersions': '0+'},
    )),
    5: ('PartitionChangeRecord', 2, (
        *_plain('PartitionId:int32', 'TopicId:uuid'),
        _tagged('Isr', '[]int32', 0, default=None, nullable=True),
        _tagged('Leader', 'int32', 1, default=-2),
        _tagged('Replicas', '[]int32', 2, default=None, nullable=True),
        _tagged('RemovingReplicas', '[]int32', 3, default=None, nullable=True),
        _tagged('AddingReplicas', '[]int32', 4, default=None, nullable=True),
        _tagged('LeaderRecoveryState', 'int8', 5, default=-1),
        _tagged('Directories', '[]uuid', 8, '1+', None, True),
        _tagged('EligibleLeaderReplicas', '[]int32', 6, '2+', None, True),
        _tagged('LastKnownElr', '[]int32', 7, '2+', None, True),
    )),
    7: ('FenceBrokerRecord', 0, _plain('Id:int32', 'Epoch:int64')),
    8: ('UnfenceBrokerRecord', 0, _plain('Id:int32', 'Epoch:int64')),
    9: ('RemoveTopicRecord', 0, _plain('TopicId:uuid')),
    10: ('DelegationTokenRecord', 0, _plain(
        'Owner:string', 'Requester:string', 'Renewers:[]string', 'IssueTimestamp:int64',
        'MaxTimestamp:int64', 'ExpirationTimestamp:int64', 'TokenId:string')),
    11: ('UserScramCredentialRecord', 0, _plain(
        'Name:string', 'Mechanism:int8', 'Salt:bytes', 'StoredKey:bytes', 'ServerKey:bytes',
        'Iterations:int32')),
    12: ('FeatureLevelRecord', 0, _plain('Name:string', 'FeatureLevel:int16')),
    14: ('ClientQuotaRecord', 0, (
        {'name': 'Entity', 'type': '[]EntityData', 'versions': '0+', 'fields': (
            {'name': 'EntityType', 'type': 'string', 'versions': '0+'},
            {'name': 'EntityName', 'type': 'string', 'versions': '0+', 'nullableVersions': '0+'},
        )},
        *_plain('Key:string', 'Value:float64', 'Remove:bool'),
    )),
    15: ('ProducerIdsRecord', 0, _plain('BrokerId:int32', 'BrokerEpoch:int64',
                                        'NextProducerId:int64')),
    17: ('BrokerRegistrationChangeRecord', 2, (
        *_plain('BrokerId:int32', 'BrokerEpoch:int64'),
        _tagged('Fenced', 'int8', 0),
        _tagged('InControlledShutdown', 'int8', 1, '1+'),
        _tagged('LogDirs', '[]uuid', 2, '2+'),
    )),
    18: ('AccessControlEntryRecord', 0, _plain(
        'Id:uuid', 'ResourceType:int8', 'ResourceName:string', 'PatternType:int8',
        'Principal:string', 'Host:string', 'Operation:int8', 'PermissionType:int8')),
    19: ('RemoveAccessControlEntryRecord', 0, _plain('Id:uuid')),
    20: ('NoOpRecord', 0, ()),
    21: ('ZkMigrationStateRecord', 0, _plain('ZkMigrationState:int8')),
    22: ('RemoveUserScramCredentialRecord', 0, _plain('Name:string', 'Mechanism:int8')),
    23: ('BeginTransactionRecord', 0, (_tagged('Name', 'string', 0, default=None, nullable=True),)),
    24: ('EndTransactionRecord', 0, ()),
    25: ('AbortTransactionRecord', 0, (_tagged('Reason', 'string', 0, default=None,
                                               nullable=True),)),
    26: ('RemoveDelegationTokenRecord', 0, _plain('TokenId:string')),
    27: ('RegisterControllerRecord', 0, (
        *_plain('ControllerId:int32', 'IncarnationId:uuid', 'ZkMigrationReady:bool'),
        {'name': 'EndPoints', 'type': '[]ControllerEndpoint', 'versions': '0+',
         'fields': _ENDPOINT},
        {'name': 'Features', 'type': '[]ControllerFeature', 'versions': '0+', 'fields': _FEATURE},
    )),
    28: ('ClearElrRecord', 0, _plain('TopicName:string')),
}
