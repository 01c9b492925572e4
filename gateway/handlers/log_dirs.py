"""DescribeLogDirs: one log directory, the broker's data directory, with every partition.

Each partition's size is the bytes its managed ledger holds (every retained ledger's
entries, so a ledger partly below the log start still counts whole, as a Kafka
segment does). The offset lag is Kafka's log end minus high watermark: entries
appended but not yet durable. Nothing is ever a future log. v4 adds the volume's
total and usable bytes. As in Kafka's ReplicaManager.describeLogDirs, a null topic
list means every partition, and requested topics or partitions the broker does not
have are left out, as are topics left with no partition.
"""
import os
import shutil

from kafka.protocol.admin import DescribeLogDirsResponse
from kafka.protocol.api_key import ApiKey

from kgate.metadata.acls import CLUSTER_NAME, Operation, ResourceType
from kgate.protocol.error_codes import ErrorCode

from . import Context, handles

R = DescribeLogDirsResponse
Result = R.DescribeLogDirsResult
TopicResult = Result.DescribeLogDirsTopic
PartitionResult = TopicResult.DescribeLogDirsPartition


@handles(ApiKey.DescribeLogDirs)
async def describe_log_dirs(ctx: Context, request):
    broker = ctx.broker
    if not ctx.allowed(Operation.DESCRIBE, ResourceType.CLUSTER, CLUSTER_NAME):
        return R(throttle_time_ms=0, error_code=ErrorCode.CLUSTER_AUTHORIZATION_FAILED, results=[])
    if request.topics is None:
        wanted = None
    else:
        wanted = {(topic.topic, index) for topic in request.topics for index in topic.partitions}
    by_topic: dict[str, list] = {}
    for (name, index), partition in broker.served():
        if wanted is not None and (name, index) not in wanted:
            continue
        ledger = partition.ledger
        by_topic.setdefault(name, []).append(PartitionResult(
            partition_index=index, partition_size=ledger.size_bytes,
            offset_lag=max(0, ledger.next_offset - ledger.high_watermark), is_future_key=False))
    log_dir = os.path.abspath(broker.settings.data_dir)
    usage = shutil.disk_usage(log_dir)
    return R(throttle_time_ms=0, error_code=ErrorCode.NONE, results=[Result(
        error_code=ErrorCode.NONE, log_dir=log_dir, total_bytes=usage.total, usable_bytes=usage.free,
        topics=[TopicResult(name=name, partitions=partitions) for name, partitions in by_topic.items()])])
