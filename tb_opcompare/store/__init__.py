"""Keeping what was read: the catalog of a logdir's runs, the parsed-profile cache, the
memory guard in front of every read, prewarming (``tb-opcompare index``) and the
settings that say where and how much."""
