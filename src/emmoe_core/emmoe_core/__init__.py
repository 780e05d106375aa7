"""The shared core of HomieBot, the layer every other package stands on.

The EMMOE protocol vocabulary (`protocol`, `names`), the ROS names (`topics`), the robot and privileged-scene
interfaces with their value types (`robot`), and the ROS 2 helper layer (`dds_guard`, `ros_helpers`, `ros_parameters`,
`ros_domains`, `action_client`, `node_exit`).
"""
