<?php echo "ok";
