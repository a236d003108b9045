"""How bytes move between this machine and a node's Docker Engine, below the log follower and the
node backends that both use it:

- ``threads``: a blocking call in a daemon thread of its own, awaited from the event loop;
- ``docker_http``: a container's log answer read straight off the Engine's HTTP socket, or relayed
  in blocks over an ssh channel;
- ``node_relay``: the relaying program itself, which runs ON the node (standard library only).

Nothing here knows about log lines, findings or nodes.
"""
