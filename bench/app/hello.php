<?php
// The memory baseline's request: nothing but PHP.
echo 'hello';
