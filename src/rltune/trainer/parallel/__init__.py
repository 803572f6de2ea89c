"""rltune.trainer.parallel: the policy update over several trainer ranks (data parallel).

* ``distributed``: the process group and FSDP2 sharding; ``DataParallelUpdater``, each rank's
  share of a mini-batch
* ``ranked``: ``RankedUpdater``, the step's updater over a ``RankTransport``
* ``ranks``: ``LocalRanks``, rank processes on this machine fed through pipes
  (``n_gpus_training``); ``rank_worker``: such a rank process, and the handlers every rank runs
* ``ray_ranks``: ``RayRanks``, every rank a Ray actor on a cluster (``nnodes_training``)
* ``sharded``: checkpoints as each rank's ``torch.distributed.checkpoint`` shards

Importing this package imports nothing else.
"""
