"""The etcd example's tests start their own clusters (``cluster_support``); nothing is probed here.

The conformance suites are not collected into this tree through the plugin (there is no etcd on a
fixed port to point them at): ``test_etcd_cluster.py`` runs ``runlane-certify run`` with the arguments
``scripts/cluster up`` printed, which runs every suite.
"""
