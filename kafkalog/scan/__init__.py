"""Scans of a log directory without Spark: the segments listed (`inventory`), a scan planned into
work units and tasks (`scan_plan`), the data source's options resolved (`source_options`) and work
units decoded into Arrow batches of a view (`views`). A Spark job runs these in its tasks
(kafkalog/spark/), and so can any other engine: nothing here imports pyspark."""
