"""The shared core of HomieBot, the layer every other package stands on.

The EMMOE protocol vocabulary (`protocol`, `names`), the ROS names and the QoS of the benchmark topics (`topics`,
`qos`), the robot and privileged-scene interfaces with their value types (`robot`), the one conversion per message
type (`convert`), the ROS 2 helper layer (`dds_guard`, `ros_helpers`, `ros_parameters`, `ros_domains`,
`action_client`, `node_exit`), and small shared helpers (`validation`, `json_text`, `closed_pipe`).
"""
