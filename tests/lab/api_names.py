"""Kafka API names → keys, as the clients spell them in their debug logs.

The lab's own table, kept apart from kinspect.wire on purpose: the lab is the oracle the decoder
is checked against, so it must not borrow the decoder's tables.
"""

from __future__ import annotations

_NAMES = (
    "Produce Fetch ListOffsets Metadata LeaderAndIsr StopReplica UpdateMetadata ControlledShutdown "
    "OffsetCommit OffsetFetch FindCoordinator JoinGroup Heartbeat LeaveGroup SyncGroup DescribeGroups "
    "ListGroups SaslHandshake ApiVersions CreateTopics DeleteTopics DeleteRecords InitProducerId "
    "OffsetForLeaderEpoch AddPartitionsToTxn AddOffsetsToTxn EndTxn WriteTxnMarkers TxnOffsetCommit "
    "DescribeAcls CreateAcls DeleteAcls DescribeConfigs AlterConfigs AlterReplicaLogDirs DescribeLogDirs "
    "SaslAuthenticate CreatePartitions CreateDelegationToken RenewDelegationToken ExpireDelegationToken "
    "DescribeDelegationToken DeleteGroups ElectLeaders IncrementalAlterConfigs "
    "AlterPartitionReassignments ListPartitionReassignments OffsetDelete DescribeClientQuotas "
    "AlterClientQuotas DescribeUserScramCredentials AlterUserScramCredentials Vote BeginQuorumEpoch "
    "EndQuorumEpoch DescribeQuorum AlterPartition UpdateFeatures Envelope FetchSnapshot DescribeCluster "
    "DescribeProducers BrokerRegistration BrokerHeartbeat UnregisterBroker DescribeTransactions "
    "ListTransactions AllocateProducerIds ConsumerGroupHeartbeat ConsumerGroupDescribe "
    "ControllerRegistration GetTelemetrySubscriptions PushTelemetry AssignReplicasToDirs "
    "ListConfigResources DescribeTopicPartitions ShareGroupHeartbeat ShareGroupDescribe ShareFetch "
    "ShareAcknowledge AddRaftVoter RemoveRaftVoter UpdateRaftVoter InitializeShareGroupState "
    "ReadShareGroupState WriteShareGroupState DeleteShareGroupState ReadShareGroupStateSummary "
    "StreamsGroupHeartbeat StreamsGroupDescribe DescribeShareGroupOffsets AlterShareGroupOffsets "
    "DeleteShareGroupOffsets"
).split()

API_KEYS: dict[str, int] = {name: key for key, name in enumerate(_NAMES)}
API_NAMES: dict[int, str] = dict(enumerate(_NAMES))

# Client spellings that differ from Kafka's: librdkafka and aiokafka say "ApiVersion",
# aiokafka calls ListOffsets "Offset".
_ALIASES = {"ApiVersion": 18, "Offset": 2}


def api_key(name: str) -> int:
    """Key for a name such as "ProduceRequest", "ApiVersionRequest_v0" stripped to "ApiVersion"."""
    for suffix in ("Request", "Response"):
        if name.endswith(suffix):
            name = name[: -len(suffix)]
            break
    key = API_KEYS.get(name, _ALIASES.get(name))
    if key is None:
        raise KeyError(f"unknown Kafka API name {name!r}")
    return key
