import warp as wp

# Silence Warp's start-up banner and module-load messages (warnings still show).
wp.config.log_level = wp.LOG_WARNING
