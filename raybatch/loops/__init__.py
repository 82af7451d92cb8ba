"""The driver-side loops: the job driver, the scheduler of chunks and the pool of writer actors."""
